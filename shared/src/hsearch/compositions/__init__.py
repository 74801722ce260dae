"""Compositions: code that composes search into something else (answers with
citations, lazy graph search).

They sit above the services (the import contracts' ``layers``): a composition may use
the search service (:class:`~hsearch.search.service.SearchService`) and the retrieval
call (:class:`~hsearch.search.passages.RetrievalService`, fused passages for a query
under a :class:`~hsearch.budget.Budget`), and nothing below imports them.
"""

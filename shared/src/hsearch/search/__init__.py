"""The query path in stages: planner, retrieval, ranking (fusion, facets, highlighting)
and the search service that composes them."""

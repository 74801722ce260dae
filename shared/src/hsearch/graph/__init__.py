"""The document graph: links between documents held in memory, and the scores a search's
graph leg ranks by (documents close to the query's best hits along those links).

``csr`` holds the graph (:class:`LinkGraph`), ``scoring`` the pure functions over it
(:func:`proximity`, :func:`personalized_pagerank`). Neither does I/O: the caller loads
the links and maps documents to nodes.
"""

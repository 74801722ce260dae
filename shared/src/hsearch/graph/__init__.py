"""The document graph: links between a tenant's documents, held in memory, and the
scores a search's graph leg ranks by (documents close to the query's best hits along
those links).

``links`` holds the links' values and rules, ``csr`` the graph (:class:`LinkGraph`),
``scoring`` the pure functions over it (:func:`proximity`,
:func:`personalized_pagerank`), ``params`` what a search asks of them; ``store`` builds
tenants' graphs from the metadata database, and ``source`` is the graph leg.
"""

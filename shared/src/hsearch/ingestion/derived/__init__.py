"""What is derived from a document (its chunks in the vector store, the tenant's lexical
statistics and vocabulary, ...), maintained through one registration: every kind is a
:class:`~hsearch.ingestion.derived.protocol.DerivedKind` in a
:class:`~hsearch.ingestion.derived.registry.DerivedKinds`, which indexing, deletion,
reindex, tenant purge and reconcile consult."""

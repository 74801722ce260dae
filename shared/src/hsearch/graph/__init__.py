"""The document graph: typed links between a tenant's documents."""

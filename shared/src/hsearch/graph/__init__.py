"""The document graph: links between a tenant's documents, and ranking along them."""

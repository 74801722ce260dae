"""Query path: fusion, filters, facets, highlighting and the search service."""

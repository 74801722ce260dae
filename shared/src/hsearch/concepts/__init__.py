"""Concepts and their communities: the Level 1 index of lazy graph search (docs/lazy.md).

``extract`` finds a text's concepts (noun phrases and named entities, by spaCy for
English and GiNZA for Japanese) as normalised keys; ``index`` builds a tenant's concept
co-occurrence graph and its hierarchical communities (Leiden) from the chunks' concepts
(pure: no I/O); ``store`` keeps tenants' indexes per data version, built from the
metadata database in the background.
"""

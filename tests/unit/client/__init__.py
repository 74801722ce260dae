"""The command line as a client of the API (hsearch.client)."""

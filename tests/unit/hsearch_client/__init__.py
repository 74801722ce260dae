"""The hsearch-client package (clients/python): against the live API, and alone."""

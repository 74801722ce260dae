"""Request and response bodies (``XCreate`` / ``XRead`` / ``XList``)."""

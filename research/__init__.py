"""Research tools: experiments on recorded benchmark data that are not the product.

Nothing in the product (``shared/``, ``services/``, ``workers/``) or in ``bench/``
imports from here; the default test run does not collect ``research/tests``
(``make test-research`` runs them). See ``research/README.md``.
"""

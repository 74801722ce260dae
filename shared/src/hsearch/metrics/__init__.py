"""Prometheus metrics (prometheus-client): the instruments every process records into,
their exposition across processes, and the figures the stats API reads from them.

* :mod:`~hsearch.metrics.instruments`: the metrics (names in docs/metrics.md) and small
  functions that record an event (a request, a search, a cache lookup, an indexed batch);
* :mod:`~hsearch.metrics.exposition`: prometheus-client's multiprocess mode (every API
  and worker process writes its samples under ``PROMETHEUS_MULTIPROC_DIR``; a scrape
  reads them all) and the figures read at scrape time (job states, queue depth,
  dependency health);
* :mod:`~hsearch.metrics.summary`: percentiles and ratios from those aggregated samples.

prometheus-client does no network I/O here (the worker's HTTP endpoint is started by the
worker), so the package sits in the base layer, beside the logging set-up.
"""

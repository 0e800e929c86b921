"""Where the long runs go, spread over Dask workers: `client` (the embedded cluster or the
user's scheduler, checked before any work), `campaign` (a fuzz campaign of many seeds) and
`explorer` (the interleaving explorer's state space split over the workers). Nothing is
imported here: Dask is loaded only by the commands that spread their runs."""

"""Building a campaign: plan what is stale, run it (in-process or on a Ray cluster) within the run
profile's limits, check and judge it, commit each result once, log the build and show its progress."""

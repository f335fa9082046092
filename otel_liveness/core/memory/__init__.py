"""What outlives a request: the exhausted-call cache, the learned keep-alive cadence and the hosts' retry budgets."""

"""Policies judged offline: the replay of a recording through the engine and the canary of candidate policies."""

"""Offline tools built on the pure core (no network, no clock)."""

"""Grafana dashboards as code (Grafana Foundation SDK); ``python -m dashboards.generate`` writes the JSON."""

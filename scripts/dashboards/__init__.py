"""The Grafana dashboards in dashboards/, written as code: `python3 scripts/gen-dashboards.py`."""

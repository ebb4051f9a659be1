"""The documentation site's generated parts and its checks (docs/, mkdocs.yml)."""

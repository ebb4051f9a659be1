"""The inventory: a YAML file of hosts read, validated and resolved once into the model the stages
read (no cycles: contracts in pyproject.toml).

    load.py         the file read under bounds, validated (schema.py), checked (checks.py), resolved
    schema.py       every field, its default and what it expects (pydantic)
    fields.py       the value types the fields take (names, ports, paths, GPUs) and their wording
    checks.py       what spans fields or hosts: names, chiefs, ports, files, the search space
    model.py        the resolved inventory: every host with every setting (inventory > ssh config > defaults)
    ssh_config.py   what ~/.ssh/config says of a host alias
    jumps.py        jump hosts parsed; patterns.py the names both check against
    tracking.py     `tracking.mlflow` resolved at load
    json_schema.py  the inventory's JSON Schema for editors (`tfcompose schema`)
"""

"""Print the stack config's JSON Schema (`make schema` writes config.schema.json)."""

import json

from .config import json_schema

if __name__ == "__main__":
    print(json.dumps(json_schema(), indent=2, sort_keys=True))

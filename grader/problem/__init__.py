"""A problem as data: its spec (YAML), words (hints.yaml), trusted reference, inputs and the course's list."""

"""ringflow steps: one plain, typed function per pipeline step (prepare, version, train, evaluate, export)."""

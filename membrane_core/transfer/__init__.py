"""Moving memories: export, import and migration from Mem0 (RFC 15)."""

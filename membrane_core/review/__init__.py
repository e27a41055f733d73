"""Review: proposed memories decided by a person before they are trusted (RFC 5.7)."""

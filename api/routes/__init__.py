"""Route modules, one router each (RFC 10.1)."""

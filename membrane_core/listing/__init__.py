"""Listing what the memory holds: records by filter, a record's lineage, operations, the work
queue and scopes (RFC 10.7). The console and the list routes are clients of this package."""

"""Developer and CI tooling: contract gate, test servers, stubs (never imported by the server)."""

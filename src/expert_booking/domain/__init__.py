"""The booking domain: entities, pure rules and errors. Imports no framework."""

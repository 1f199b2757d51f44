"""End-to-end tests: the installed server as a child process, driven over real HTTP."""

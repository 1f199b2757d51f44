"""Access control that is not the booking core: who calls, how often, and which tools are on."""

"""Test support shipped with the package: a payment service stub and a server process runner."""

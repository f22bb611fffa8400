"""What tests share: helpers, stand-ins and the process guard (tests/README.md). Not a test folder: pytest collects
no test here."""

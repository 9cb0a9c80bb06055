"""Looking back at what ranks did: the flight recorder of recent operations (and trace files)."""

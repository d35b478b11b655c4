suite_injection() { echo todo injection; }

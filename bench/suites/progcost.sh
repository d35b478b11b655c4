suite_progcost() { echo todo progcost; }

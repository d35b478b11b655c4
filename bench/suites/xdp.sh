suite_xdp() { echo todo xdp; }

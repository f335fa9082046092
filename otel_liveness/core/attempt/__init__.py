"""One attempt: its books (body mode, hold, release), its clocks and the failure decisions they lead to."""

"""IPython stand-in for the corpus runner: scripts exported from notebooks import its debugger's `set_trace`
(commented out where called); it is here, and stops nothing."""

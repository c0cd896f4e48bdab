"""mpl_toolkits stand-in (see matplotlib/)."""

"""cli layer (see DESIGN.md section 9)."""

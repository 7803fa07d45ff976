"""forge layer (see DESIGN.md section 9)."""

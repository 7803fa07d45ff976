"""services layer (see DESIGN.md section 9)."""

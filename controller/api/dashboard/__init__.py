"""The operator dashboard: server-rendered pages, the SVG progress chart and the live script."""

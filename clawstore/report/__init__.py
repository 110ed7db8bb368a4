"""`claw report`: one campaign's last build as text, JSON and a score-vs-cost chart, from stored records.

Entry points: `data.build_report(store, campaign_id)`,
`text.render_text(report)`, `report.to_json()`, `chart.write_chart(report, path)`.
"""

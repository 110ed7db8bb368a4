def check_length(artifact, case):
    text = (artifact or {}).get("final_response") or ""
    return {"passed": len(text.split()) < 50, "message": "word count"}

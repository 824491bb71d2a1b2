# ruff: noqa: E501  (catalogue lines stay whole)
"""The texts of the `approvals` built-in; the requests' and answers' own words are the core's
(`core.approval.*`: function_calls/approvals.py)."""

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "help.fn.approve": "Approve a held call: /approve ID (the ID is in the request).",
        "help.fn.deny": "Deny a held call: /deny ID [reason].",
        "approvals.off": "Approvals are not kept by this bot.",
    },
    "zh": {
        "help.fn.approve": "批准一个等待中的调用：/approve ID（ID 见请求消息）。",
        "help.fn.deny": "拒绝一个等待中的调用：/deny ID [理由]。",
        "approvals.off": "这个机器人没有保存审批。",
    },
}

// Make the URL and the title longer than the API accepts (see hiding.html).
history.replaceState(null, "", "hiding.html?" + "q".repeat(20480));
document.title = "ж".repeat(2600) + "end";

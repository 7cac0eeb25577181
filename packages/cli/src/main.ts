console.log("geoquota: CLI not built yet");

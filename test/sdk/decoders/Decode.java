import com.example.voice.*;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.deser.std.StdDeserializer;
import com.fasterxml.jackson.databind.module.SimpleModule;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.OffsetDateTime;
import java.util.Map;

/**
 * Decodes real webhook bodies with Modelina's Java models (Jackson preset). argv: the bodies file
 * (JSON lines of {"kind", "body"}). Prints one line a body: "ok <kind>" or "fail <kind> <error>".
 * The OffsetDateTime reader stands in for jackson-datatype-jsr310 (not packaged by Debian).
 */
public class Decode {
  static class OffsetDateTimeReader extends StdDeserializer<OffsetDateTime> {
    OffsetDateTimeReader() { super(OffsetDateTime.class); }
    @Override
    public OffsetDateTime deserialize(JsonParser p, DeserializationContext c) throws IOException {
      return OffsetDateTime.parse(p.getText());
    }
  }

  static final Map<String, Class<?>> CLASSES = Map.of(
      "call.completed", CallCompletedEvent.class,
      "batch.completed", BatchCompletedEvent.class,
      "call.status_changed", CallStatusChangedEvent.class,
      "call.transcript", CallTranscriptEvent.class);

  public static void main(String[] args) throws Exception {
    ObjectMapper mapper = new ObjectMapper().registerModule(new SimpleModule().addDeserializer(OffsetDateTime.class, new OffsetDateTimeReader()));
    for (String line : Files.readAllLines(Path.of(args[0]))) {
      JsonNode item = mapper.readTree(line);
      String kind = item.get("kind").asText();
      try {
        Object model = mapper.treeToValue(item.get("body"), CLASSES.get(kind));
        String extra = "";
        if (model instanceof CallCompletedEvent e && e.getRecording() != null) extra = " channels=" + e.getRecording().getChannels().getValue();
        System.out.println("ok " + kind + extra);
      } catch (Exception e) {
        System.out.println("fail " + kind + " " + e.toString().replace('\n', ' '));
      }
    }
  }
}
